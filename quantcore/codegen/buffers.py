"""Scratch-buffer sizes of CMSIS-NN calls: what each kernel's `*_get_buffer_size` returns, per core.

The generated C hands every layer call a `cmsis_nn_context` whose buffer is a slice of the static arena,
so the sizes are needed at generation time, for the core the firmware is built for. CMSIS-NN picks its
code path from the core's extension (quantcore.cores.Extension) and the scratch each path needs differs;
CMSIS-NN v7 compiles the pure-C, `_dsp` and `_mve` variants of every `*_get_buffer_size` function on
every architecture, which is how tests/codegen/test_buffers.py checks each formula here against the C.

The formulas restate CMSIS-NN v7.0.0's Source/*/arm_*_get_buffer_sizes_*.c and the wrappers' dispatch
conditions (Include/arm_nnsupportfunctions.h). They are those of a GCC or LLVM build, which is what
Fixpoint's target builds use. Arm Compiler 6 (`__ARMCC_VERSION`) differs in two places, chosen with
`armclang=True`: the DSP 1x1 fast convolution asks for an im2col buffer, and MVE runs a one-input-channel
depthwise layer as a convolution only above 8 output channels instead of above 1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from quantcore.codegen.errors import CodegenError
from quantcore.cores import Core, Extension
from quantcore.ir import Graph, Node, Op

Pair = tuple[int, int]

INT16_BYTES = 2
INT32_BYTES = 4
CH_IN_BLOCK_MVE = 124
"""Channels per block of arm_depthwise_conv_s8_opt's MVE path (arm_nnsupportfunctions.h)."""
REVERSE_TCOL_EFFICIENT_THRESHOLD = 16
"""Input depth above which arm_transpose_conv_wrapper_s8 runs a reversed convolution."""
FAST_DW_S16_MAX_TAPS = 512
"""USE_FAST_DW_CONV_S16_FUNCTION: kernels of fewer taps than this run arm_depthwise_conv_fast_s16."""


class BufferSizeError(CodegenError):
    """A node whose scratch size cannot be computed: an unknown kernel or shapes that do not fit it."""


@dataclass(frozen=True)
class Dims:
    """cmsis_nn_dims as the get_buffer_size functions read it."""

    n: int
    h: int
    w: int
    c: int


@dataclass(frozen=True)
class Call:
    """The arguments of one layer call that the get_buffer_size functions read; pairs are (h, w)."""

    input: Dims
    filter: Dims
    output: Dims
    stride: Pair = (1, 1)
    padding: Pair = (0, 0)
    dilation: Pair = (1, 1)
    ch_mult: int = 1


SizeFn = Callable[[Call, Extension, bool], int]


# -- C integer arithmetic -------------------------------------------------------------------------


def _c_div(a: int, b: int) -> int:
    """C's `/` on int32: truncates toward zero (Python's // floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _c_rem(a: int, b: int) -> int:
    """C's `%`: takes the sign of the dividend."""
    return a - b * _c_div(a, b)


# -- convolution ----------------------------------------------------------------------------------


def is_convolve_1x1(call: Call) -> bool:
    """arm_nn_is_convolve_1x1: arm_convolve_wrapper_s8 runs arm_convolve_1x1_s8[_fast]."""
    return (
        call.padding == (0, 0)
        and (call.filter.h, call.filter.w) == (1, 1)
        and call.dilation == (1, 1)
        and call.input.c == call.filter.c
    )


def is_convolve_1_x_n(call: Call) -> bool:
    """arm_nn_is_convolve_1_x_n: arm_convolve_wrapper_s8 runs arm_convolve_1_x_n_s8."""
    return (
        call.input.h == 1
        and call.dilation[1] == 1
        and call.filter.h == 1
        and (call.stride[1] * call.input.c) % 4 == 0
        and call.input.c == call.filter.c
    )


def convolve_s8(input: Dims, filter: Dims) -> int:
    """arm_convolve_s8_get_buffer_size off MVE: two im2col columns of int16, padded to 4 values."""
    cols = filter.w * filter.h * input.c
    return 2 * (cols + (-cols) % 4) * INT16_BYTES


def convolve_s8_mve(input: Dims, filter: Dims) -> int:
    """arm_convolve_s8_get_buffer_size_mve: four im2col columns, each whole 16-byte Q registers."""
    lanes = (input.c * filter.w * filter.h + 15) // 16
    return 4 * lanes * 16


def convolve_1_x_n_s8_mve(call: Call) -> int:
    """arm_convolve_1_x_n_s8_get_buffer_size_mve: the padded left/right im2col rows, or the generic MVE
    size when the output columns do not split into left-padded, unpadded and right-padded ones."""
    c, pad, stride, kernel = call.input.c, call.padding[1], call.stride[1], call.filter.w
    asym = _c_rem((call.output.w - 1) * stride + kernel - call.input.w, 2)
    right = max(1, _c_div(pad + asym + stride - 1, stride)) if pad + asym != 0 else 0
    left = max(1, _c_div(pad + stride - 1, stride)) if pad != 0 else 0
    middle = max(call.output.w - (right + left), 0)
    if right + middle + left != call.output.w:
        return convolve_s8_mve(call.input, call.filter)
    pad_left = pad * c
    pad_right = right * c if asym else pad_left
    elems_left = kernel * c
    return max(elems_left + pad_left, elems_left - c + pad_right)


def convolve_wrapper_s8(call: Call, ext: Extension, armclang: bool = False) -> int:
    """arm_convolve_wrapper_s8_get_buffer_size{,_dsp,_mve}: the size of the path the wrapper takes."""
    if is_convolve_1x1(call):
        # arm_convolve_1x1_s8_fast_get_buffer_size_dsp asks for 2 * C int16 only under Arm Compiler 6.
        fast = call.stride == (1, 1)
        return 2 * call.input.c * INT16_BYTES if fast and ext is Extension.DSP and armclang else 0
    if ext is Extension.MVE:
        if is_convolve_1_x_n(call):
            return convolve_1_x_n_s8_mve(call)
        return convolve_s8_mve(call.input, call.filter)
    return convolve_s8(call.input, call.filter)  # off MVE, arm_convolve_1_x_n_s8 takes the generic size


def convolve_wrapper_s16(call: Call, ext: Extension, armclang: bool = False) -> int:
    """arm_convolve_wrapper_s16_get_buffer_size{,_dsp,_mve} (arm_convolve_s16's im2col)."""
    cols = call.input.c * call.filter.w * call.filter.h
    if ext is Extension.MVE:
        return 4 * ((cols + 7) // 8) * 8 * INT16_BYTES
    return 2 * cols * INT16_BYTES


# -- depthwise convolution ------------------------------------------------------------------------


def _depthwise_to_conv_mve(call: Call) -> int:
    """arm_deptwise_conv_s8_one_in_ch_get_buffer_size_mve: the convolution's scratch, then the
    transposed weights (the conv filter is the depthwise one with n and c swapped)."""
    f = call.filter
    conv = Call(call.input, Dims(f.c, f.h, f.w, f.n), call.output, call.stride, call.padding, call.dilation)
    return convolve_wrapper_s8(conv, Extension.MVE) + f.c * f.h * f.w * f.n


def depthwise_conv_wrapper_s8(call: Call, ext: Extension, armclang: bool = False) -> int:
    """arm_depthwise_conv_wrapper_s8_get_buffer_size{,_dsp,_mve}: 0 for arm_depthwise_conv_s8 and
    arm_depthwise_conv_3x3_s8, arm_depthwise_conv_s8_opt's size, or on MVE the converted convolution's."""
    f = call.filter
    size = 0
    if call.input.c == call.output.c and call.input.n == 1 and call.dilation == (1, 1):
        three_by_three = (f.h, f.w) == (3, 3) and max(call.padding) <= 1  # arm_depthwise_conv_3x3_s8
        if ext is Extension.MVE:
            size = 4 * CH_IN_BLOCK_MVE * f.w * f.h
        elif ext is Extension.DSP and not three_by_three:
            size = call.input.c * f.w * f.h * INT16_BYTES
    threshold = 8 if armclang else 1  # CONVERT_DW_CONV_WITH_ONE_INPUT_CH_AND_OUTPUT_CH_ABOVE_THRESHOLD
    if ext is Extension.MVE and call.input.c == 1 and call.output.c > threshold:
        return max(size, _depthwise_to_conv_mve(call))
    return size


def depthwise_conv_wrapper_s16(call: Call, ext: Extension, armclang: bool = False) -> int:
    """arm_depthwise_conv_wrapper_s16_get_buffer_size{,_dsp,_mve}: arm_depthwise_conv_fast_s16's buffer."""
    taps = call.filter.w * call.filter.h
    fast = call.ch_mult == 1 and call.dilation == (1, 1) and taps < FAST_DW_S16_MAX_TAPS
    if not fast or ext is Extension.NONE:
        return 0
    if ext is Extension.MVE:
        return 4 * call.input.c * taps * INT16_BYTES + 8  # + 8: the *_nt_t_* kernel reads past the end
    return call.input.c * taps * INT16_BYTES


# -- transposed convolution -----------------------------------------------------------------------


def uses_reverse_conv(call: Call) -> bool:
    """arm_transpose_conv_wrapper_s8 runs arm_convolve_s8 on the upscaled input instead."""
    return max(call.stride) <= 2 and call.input.c > REVERSE_TCOL_EFFICIENT_THRESHOLD


def _upscaled(call: Call) -> Dims:
    i = call.input
    return Dims(i.n, i.h * call.stride[0], i.w * call.stride[1], i.c)


def transpose_conv_s8_declared(call: Call, ext: Extension, armclang: bool = False) -> int:
    """arm_transpose_conv_s8_get_buffer_size{,_mve} exactly, including its shortfall (see
    transpose_conv_wrapper_s8): the row buffer's width uses MAX(kernel_w, stride_h)."""
    if uses_reverse_conv(call):
        size = convolve_s8_mve if ext is Extension.MVE else convolve_s8
        return size(_upscaled(call), call.filter)
    return _column_buffer(call, max(call.filter.w, call.stride[0]))


def _column_buffer(call: Call, last_column: int) -> int:
    width = ((call.input.w - 1) * call.stride[1] + last_column) * call.output.c
    return width * max(call.filter.h, call.stride[0]) * INT32_BYTES


def transpose_conv_wrapper_s8(call: Call, ext: Extension, armclang: bool = False) -> int:
    """What arm_transpose_conv_wrapper_s8 needs in `ctx`: transpose_conv_s8_declared, but never less than
    the rows arm_transpose_conv_s8 writes, MAX(kernel_w, stride_w) columns wide. CMSIS-NN's function
    uses stride_h there, so it asks for too little when stride_w > max(kernel_w, stride_h)."""
    declared = transpose_conv_s8_declared(call, ext)
    if uses_reverse_conv(call):
        return declared
    return max(declared, _column_buffer(call, max(call.filter.w, call.stride[1])))


def reverse_conv_bytes(call: Call) -> int:
    """arm_transpose_conv_s8_get_reverse_conv_buffer_size: the wrapper's second context (`reverse_conv_ctx`),
    which holds the flipped weights on the reverse-conv path."""
    if not uses_reverse_conv(call):
        return 0
    return call.input.c * call.filter.w * call.filter.h * call.filter.n


# -- fully connected and pooling ------------------------------------------------------------------


def fully_connected_s8(call: Call, ext: Extension, armclang: bool = False) -> int:
    """arm_fully_connected_s8_get_buffer_size{,_dsp,_mve} (arm_fully_connected_per_channel_s8 uses it too):
    on MVE one int32 kernel sum per output channel (filter_dims->c)."""
    return call.filter.c * INT32_BYTES if ext is Extension.MVE else 0


def avgpool(call: Call, ext: Extension, armclang: bool = False) -> int:
    """arm_avgpool_s8/_s16_get_buffer_size{,_dsp,_mve}(output w, channels): one int32 row sum per channel
    on the DSP path only."""
    return call.input.c * INT32_BYTES if ext is Extension.DSP else 0


def svdf_s8(call: Call, ext: Extension, armclang: bool = False) -> int:
    """arm_svdf_s8_get_buffer_size{,_dsp,_mve}(weights_feature_dims): on MVE one int32 row sum per
    feature filter (weights_feature_dims->n), which the caller computes; none on the other paths."""
    return call.filter.n * INT32_BYTES if ext is Extension.MVE else 0


def no_buffer(call: Call, ext: Extension, armclang: bool = False) -> int:
    """Kernels that take no scratch (no get_buffer_size function, or one that returns 0 everywhere)."""
    return 0


# -- reading the call from the graph --------------------------------------------------------------


def _dims(graph: Graph, node: Node, name: str) -> Dims:
    shape = graph.tensor(name).shape
    if len(shape) == 4:
        return Dims(*shape)
    if len(shape) == 2:  # fully connected (N, K)
        return Dims(shape[0], 1, 1, shape[1])
    raise BufferSizeError(f"node {node.name!r}: tensor {name!r} has shape {shape}; expected NHWC or (N, K)")


def _filter(graph: Graph, node: Node) -> tuple[int, ...]:
    if len(node.inputs) < 2 or not node.inputs[1]:
        raise BufferSizeError(f"node {node.name!r} ({node.attr('kernel')}) has no weights input")
    return tuple(int(d) for d in np.shape(graph.constant(node.inputs[1])))


def _pair(node: Node, key: str, default: Pair) -> Pair:
    value = node.attr("params", {}).get(key, default)
    if len(value) != 2:
        raise BufferSizeError(f"node {node.name!r}: params[{key!r}] is {value!r}; expected (h, w)")
    return int(value[0]), int(value[1])


def _window_call(graph: Graph, node: Node, filter: Dims, ch_mult: int = 1) -> Call:
    return Call(
        _dims(graph, node, node.inputs[0]),
        filter,
        _dims(graph, node, node.outputs[0]),
        _pair(node, "stride", (1, 1)),
        _pair(node, "padding", (0, 0)),
        _pair(node, "dilation", (1, 1)),
        ch_mult,
    )


def _conv_call(graph: Graph, node: Node) -> Call:
    """Weights (C_out, kh, kw, C_in / groups) are cmsis_nn_dims (n, h, w, c) as they are."""
    w = _filter(graph, node)
    if len(w) != 4:
        raise BufferSizeError(f"node {node.name!r}: weights of shape {w}; expected (C_out, kh, kw, C_in)")
    return _window_call(graph, node, Dims(*w))


def _depthwise_call(graph: Graph, node: Node) -> Call:
    """Weights (1, kh, kw, C * ch_mult); ch_mult as the quantizer wrote it, else from the channels."""
    call = _conv_call(graph, node)
    mult = node.attr("params", {}).get("ch_mult", call.output.c // max(call.input.c, 1))
    return _window_call(graph, node, call.filter, int(mult))


def _fc_call(graph: Graph, node: Node) -> Call:
    """Weights (C_out, depth) are filter_dims {n = depth, c = C_out}."""
    w = _filter(graph, node)
    if len(w) != 2:
        raise BufferSizeError(f"node {node.name!r}: weights of shape {w}; expected (C_out, depth)")
    x, y = _dims(graph, node, node.inputs[0]), _dims(graph, node, node.outputs[0])
    return Call(x, Dims(w[1], 1, 1, w[0]), y)


def _pool_call(graph: Graph, node: Node) -> Call:
    kh, kw = _pair(node, "kernel", (1, 1))
    return _window_call(graph, node, Dims(1, kh, kw, 1))


def _svdf_call(graph: Graph, node: Node) -> Call:
    """Feature weights (filters, depth) are weights_feature_dims {n = filters, h = depth}."""
    w = _filter(graph, node)
    if len(w) != 2:
        raise BufferSizeError(f"node {node.name!r}: feature weights of shape {w}; expected (filters, depth)")
    x, y = _dims(graph, node, node.inputs[0]), _dims(graph, node, node.outputs[0])
    return Call(x, Dims(w[0], w[1], 1, 1), y)


def _no_call(graph: Graph, node: Node) -> Call:
    empty = Dims(0, 0, 0, 0)
    return Call(empty, empty, empty)


Reader = Callable[[Graph, Node], Call]

KERNELS: dict[str, tuple[Reader, SizeFn]] = {
    "arm_convolve_wrapper_s8": (_conv_call, convolve_wrapper_s8),
    "arm_depthwise_conv_wrapper_s8": (_depthwise_call, depthwise_conv_wrapper_s8),
    "arm_fully_connected_s8": (_fc_call, fully_connected_s8),
    "arm_fully_connected_per_channel_s8": (_fc_call, fully_connected_s8),
    "arm_avgpool_s8": (_pool_call, avgpool),
    "arm_max_pool_s8": (_no_call, no_buffer),
    "arm_softmax_s8": (_no_call, no_buffer),
    "arm_elementwise_add_s8": (_no_call, no_buffer),
    "arm_elementwise_mul_s8": (_no_call, no_buffer),
    "arm_convolve_wrapper_s16": (_conv_call, convolve_wrapper_s16),
    "arm_depthwise_conv_wrapper_s16": (_depthwise_call, depthwise_conv_wrapper_s16),
    "arm_fully_connected_s16": (_fc_call, no_buffer),  # its get_buffer_size returns 0 on every path
    "arm_avgpool_s16": (_pool_call, avgpool),
    "arm_max_pool_s16": (_no_call, no_buffer),
    "arm_elementwise_add_s16": (_no_call, no_buffer),
    "arm_elementwise_mul_s16": (_no_call, no_buffer),
    "arm_transpose_conv_wrapper_s8": (_conv_call, transpose_conv_wrapper_s8),
    "fixpoint_requantize": (_no_call, no_buffer),  # Fixpoint's own loop, no CMSIS-NN context
    # The LSTM's buffers are its own (cmsis_nn_lstm_context, static beside the arena), not ctx.buf.
    "arm_lstm_unidirectional_s8": (_no_call, no_buffer),
    "arm_lstm_unidirectional_s16": (_no_call, no_buffer),
    "arm_svdf_state_s16_s8": (_no_call, no_buffer),
    "arm_svdf_s8": (_svdf_call, svdf_s8),
    "arm_softmax_s8_s16": (_no_call, no_buffer),
}
"""Every kernel the int8 executor dispatches (and the transposed convolution), keyed by node attr kernel."""

_DATA_MOVES = (Op.RESHAPE, Op.TRANSPOSE, Op.CONCAT, Op.PAD, Op.IDENTITY)
"""Ops run as copies (arm_reshape_s8, arm_transpose_s8, arm_concatenation_s8_*, arm_pad_s8: no context)."""


def layer_call(graph: Graph, node: Node) -> Call:
    """The get_buffer_size arguments of `node`'s CMSIS-NN call, read from the graph's shapes and params."""
    return _entry(node)[0](graph, node)


def scratch_bytes(graph: Graph, node: Node, core: Core, *, armclang: bool = False) -> int:
    """Bytes of `ctx.buf` that `node`'s CMSIS-NN call needs on `core` (0: no buffer).

    This is what the kernel's `*_get_buffer_size` returns on the core's code path (the pure-C function for
    Extension.NONE, `_dsp` for DSP, `_mve` for MVE), except where CMSIS-NN's function is known to return
    too little (transpose_conv_wrapper_s8), where it is what the kernel actually uses.
    """
    if node.op in _DATA_MOVES:
        return 0
    reader, size = _entry(node)
    return size(reader(graph, node), core.extension, armclang)


def _entry(node: Node) -> tuple[Reader, SizeFn]:
    kernel = node.attr("kernel")
    if kernel not in KERNELS:
        known = ", ".join(sorted(KERNELS))
        raise BufferSizeError(
            f"node {node.name!r} ({node.op.json_name}): no scratch-size rule for kernel {kernel!r};"
            f" quantize the graph first, or add the kernel to quantcore.codegen.buffers (known: {known})"
        )
    return KERNELS[kernel]
