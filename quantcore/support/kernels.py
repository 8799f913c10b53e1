"""What CMSIS-NN's kernels require of an IR node in CMSIS-NN form (after the passes: NHWC, fused activations).

Codegen checks these before lowering a node and the server reports them; each docstring is the message.
The importer does not check them: an imported float graph is in ONNX form, and the passes may still fix
what these reject (fold a BATCH_NORM, fuse a RELU, make padding explicit).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from quantcore.display import quoted
from quantcore.ir import Graph, Layout, Node, Op
from quantcore.support.table import Constraint, KernelConstraint, KernelSupport, about

Subject = tuple[Graph, Node]


def _c(*checks: Callable[[Subject], bool]) -> tuple[KernelConstraint, ...]:
    return tuple(Constraint(check) for check in checks)


def _hwc(graph: Graph, name: str) -> tuple[int, int, int]:
    """(H, W, C) of a 4-D activation, read according to its layout (NCHW unless marked NHWC)."""
    tensor = graph.tensor(name)
    _, a, b, c = tensor.shape
    return (a, b, c) if tensor.layout is Layout.NHWC else (b, c, a)


# -- what a failing node has ----------------------------------------------------------------------------


def _conv_1xn_padding(subject: Subject) -> str:
    graph, node = subject
    _, w, _ = _hwc(graph, node.inputs[0])
    _, ow, _ = _hwc(graph, node.outputs[0])
    weights = graph.tensor(node.inputs[1]).shape
    kw = weights[2] if graph.tensor(node.inputs[0]).layout is Layout.NHWC else weights[3]
    left = node.attr("pads", (0, 0, 0, 0))[1]
    right = (ow - 1) * node.attr("strides", (1, 1))[1] + kw - w - left
    return f"it is a 1xN convolution padded {left} on the left and {right} on the right"


def _pool_pads(subject: Subject) -> str:
    return f"its {_pads_and_kernel(subject[1])}"


def _counted_pads(subject: Subject) -> str:
    return f"it counts the padding in its average (count_include_pad), and its {_pads_and_kernel(subject[1])}"


def _pads_and_kernel(node: Node) -> str:
    pads, kernel = tuple(node.attr("pads", (0, 0, 0, 0))), tuple(node.attr("kernel"))
    return f"pads (top, left, bottom, right) are {pads} and its kernel {kernel}"


def _shapes(subject: Subject) -> str:
    graph, node = subject
    shapes = ", ".join(f"{quoted(i)} {graph.tensor(i).shape}" for i in node.inputs if i)
    return f"its inputs are {shapes} and its output {graph.tensor(node.outputs[0]).shape}"


def _softmax_axis(subject: Subject) -> str:
    graph, node = subject
    return f"its axis is {node.attr('axis')} of a {len(graph.tensor(node.inputs[0]).shape)}-D input"


def _ranks(subject: Subject) -> str:
    graph, node = subject
    rank = max(len(graph.tensor(name).shape) for name in (*node.inputs, *node.outputs) if name)
    return f"it has a {rank}-D tensor"


def _producer(subject: Subject) -> str:
    graph, node = subject
    source = node.inputs[0]
    producer = next((n for n in graph.nodes if source in n.outputs), None)
    if producer is None:
        return f"its input {quoted(source)} is the graph's input, not a layer's output"
    readers = sum(source in n.inputs for n in graph.nodes)
    shared = f", which {readers} nodes read" if readers > 1 else ""
    return (
        f"its input {quoted(source)} comes from the {producer.op.json_name} {quoted(producer.name)}{shared}"
    )


# -- convolution ----------------------------------------------------------------------------------------


@about(_conv_1xn_padding)
def conv_1xn_padding_same(subject: Subject) -> bool:
    """On MVE builds (Cortex-M55) arm_convolve_wrapper_s8 runs a 1xN convolution (input and kernel height
    1, dilation 1, stride_w * C_in a multiple of 4, not grouped) with arm_convolve_1_x_n_s8, which returns
    ARM_CMSIS_NN_FAILURE unless the horizontal padding is TF 'SAME' (right = left or left + 1, the right
    side counted from the output width). Other paths bounds-check every tap and take any non-negative
    padding. Pad explicitly (PAD) in front."""
    graph, node = subject
    h, w, c = _hwc(graph, node.inputs[0])
    _, ow, _ = _hwc(graph, node.outputs[0])
    weights = graph.tensor(node.inputs[1]).shape
    # In CMSIS form (NHWC activations) filters are OHWI; in ONNX form OIHW.
    nhwc = graph.tensor(node.inputs[0]).layout is Layout.NHWC
    kh, kw = (weights[1], weights[2]) if nhwc else (weights[2], weights[3])
    left = node.attr("pads", (0, 0, 0, 0))[1]
    stride_w = node.attr("strides", (1, 1))[1]
    one_by_n = h == 1 and kh == 1 and node.attr("dilations", (1, 1))[1] == 1 and stride_w * c % 4 == 0
    if not one_by_n or node.attr("groups", 1) != 1:
        return True
    right = (ow - 1) * stride_w + kw - w - left
    return right in (left, left + 1)


# -- pooling --------------------------------------------------------------------------------------------


@about(_counted_pads)
def avgpool_padding_not_counted(subject: Subject) -> bool:
    """arm_avgpool_s8 divides by the number of input pixels inside the window; padding never counts.
    An AVG_POOL with count_include_pad and non-zero pads needs an explicit PAD (with the zero point) in
    front and no padding of its own."""
    _, node = subject
    if not node.attr("count_include_pad", False):
        return True
    pads = node.attr("pads", (0, 0, 0, 0))
    extra_bottom, extra_right = node.attr("ceil_pads", (0, 0))
    return bool(pads[0] == pads[1] == 0 and pads[2] == extra_bottom and pads[3] == extra_right)


@about(_pool_pads)
def pool_pads_smaller_than_kernel(subject: Subject) -> bool:
    """Every pooling window must hold at least one input pixel: arm_avgpool_s8 returns
    ARM_CMSIS_NN_ARG_ERROR for an empty window and arm_max_pool_s8 leaves garbage, so each pad must be
    smaller than the kernel."""
    _, node = subject
    kh, kw = node.attr("kernel")
    top, left, bottom, right = node.attr("pads", (0, 0, 0, 0))
    return bool(max(top, bottom) < kh and max(left, right) < kw)


# -- elementwise, softmax, data movement ----------------------------------------------------------------


@about(_shapes)
def elementwise_same_shape(subject: Subject) -> bool:
    """arm_elementwise_add_s8 and arm_elementwise_mul_s8 combine two vectors of equal length (no
    broadcasting). A constant operand is broadcast when the C code is generated; an activation operand
    must have the output's shape."""
    graph, node = subject
    out = graph.tensor(node.outputs[0]).shape
    return all(graph.tensor(i).shape == out or graph.tensor(i).is_constant for i in node.inputs)


@about(_softmax_axis)
def softmax_last_axis(subject: Subject) -> bool:
    """arm_softmax_s8 normalises rows of the innermost dimension (num_rows x row_size): the softmax must be
    over the last axis (in NHWC, the channels)."""
    graph, node = subject
    return bool(node.attr("axis") == len(graph.tensor(node.inputs[0]).shape) - 1)


@about(_ranks)
def at_most_4d(subject: Subject) -> bool:
    """arm_pad_s8, arm_transpose_s8 and arm_concatenation_s8_* describe tensors with cmsis_nn_dims
    (N, H, W, C): at most 4 dimensions."""
    graph, node = subject
    return all(len(graph.tensor(name).shape) <= 4 for name in (*node.inputs, *node.outputs) if name)


@about(_producer)
def batchnorm_folded(subject: Subject) -> bool:
    """CMSIS-NN has no batch-norm kernel: a BATCH_NORM must directly follow a CONV2D or FULLY_CONNECTED
    whose output only it reads, so that fold_bn folds it into that layer's weights and bias."""
    return False


@about(_producer)
def activation_fused(subject: Subject) -> bool:
    """A RELU or CLIP must be fused into the layer that produces its input (as the kernel's
    [act_min, act_max] clamp): CMSIS-NN's standalone arm_relu_q7 / arm_relu6_s8 clamp at integer 0 (and
    6), which is the real 0 only for a zero point of 0."""
    return False


# -- the whole graph ------------------------------------------------------------------------------------


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


@about(
    lambda graph: (
        f"the model has {_plural(len(graph.inputs), 'input')} and {_plural(len(graph.outputs), 'output')}"
    )
)
def one_input_one_output(graph: Graph) -> bool:
    """The generated firmware runs a network of one input and one output (its _input() and _output()
    each point at one tensor), and calibration data is one array: export the model with a single input
    and a single output (concatenate several outputs into one)."""
    return len(graph.inputs) == 1 and len(graph.outputs) == 1


GRAPH: tuple[Constraint[Graph], ...] = (Constraint(one_input_one_output),)
"""What the whole graph must be, checked before its nodes."""

KERNELS: Mapping[Op, KernelSupport] = {
    s.op: s
    for s in (
        KernelSupport(
            Op.CONV2D,
            ("arm_convolve_wrapper_s8", "arm_convolve_wrapper_s16"),
            _c(conv_1xn_padding_same),
            "The wrapper picks arm_convolve_1x1_s8_fast / _1x1_s8 / _1_x_n_s8 / arm_convolve_s8.",
        ),
        KernelSupport(
            Op.DEPTHWISE_CONV2D,
            ("arm_depthwise_conv_wrapper_s8", "arm_depthwise_conv_wrapper_s16"),
            (),
            "The wrapper picks arm_depthwise_conv_3x3_s8 / _s8_opt / arm_depthwise_conv_s8.",
        ),
        KernelSupport(Op.FULLY_CONNECTED, ("arm_fully_connected_s8", "arm_fully_connected_s16")),
        KernelSupport(Op.BATCH_NORM, (), _c(batchnorm_folded)),
        KernelSupport(Op.RELU, (), _c(activation_fused)),
        KernelSupport(Op.CLIP, (), _c(activation_fused)),
        KernelSupport(
            Op.MAX_POOL, ("arm_max_pool_s8", "arm_max_pool_s16"), _c(pool_pads_smaller_than_kernel)
        ),
        KernelSupport(
            Op.AVG_POOL,
            ("arm_avgpool_s8", "arm_avgpool_s16"),
            _c(pool_pads_smaller_than_kernel, avgpool_padding_not_counted),
        ),
        KernelSupport(
            Op.GLOBAL_AVG_POOL,
            ("arm_avgpool_s8", "arm_avgpool_s16"),
            (),
            "An average pool whose kernel is the whole (H, W).",
        ),
        KernelSupport(
            Op.ADD, ("arm_elementwise_add_s8", "arm_elementwise_add_s16"), _c(elementwise_same_shape)
        ),
        KernelSupport(
            Op.MUL, ("arm_elementwise_mul_s8", "arm_elementwise_mul_s16"), _c(elementwise_same_shape)
        ),
        KernelSupport(
            Op.SOFTMAX, ("arm_softmax_s8", "arm_softmax_s8_s16", "arm_softmax_s16"), _c(softmax_last_axis)
        ),
        KernelSupport(
            Op.CONCAT,
            (
                "arm_concatenation_s8_x",
                "arm_concatenation_s8_y",
                "arm_concatenation_s8_z",
                "arm_concatenation_s8_w",
            ),
            _c(at_most_4d),
        ),
        KernelSupport(Op.PAD, ("arm_pad_s8",), _c(at_most_4d)),
        KernelSupport(Op.RESHAPE, ("arm_reshape_s8",), (), "A copy (or nothing, when the buffer is reused)."),
        KernelSupport(Op.TRANSPOSE, ("arm_transpose_s8",), _c(at_most_4d)),
        KernelSupport(Op.IDENTITY, (), (), "Removed by the passes (or a copy)."),
        KernelSupport(
            Op.REQUANTIZE,
            ("fixpoint_requantize",),
            (),
            "Inserted by the quantizer between int8 and int16 layers; Fixpoint's own function "
            "(CMSIS-NN has none).",
        ),
        KernelSupport(
            Op.SVDF,
            ("arm_svdf_s8", "arm_svdf_state_s16_s8"),
            (),
            "From an int8 .tflite: int8 state and time weights (arm_svdf_s8) or int16"
            " (arm_svdf_state_s16_s8); from a float .tflite, calibrated: int16 (arm_svdf_state_s16_s8). The"
            " state persists between inferences.",
        ),
        KernelSupport(
            Op.LSTM,
            ("arm_lstm_unidirectional_s8", "arm_lstm_unidirectional_s16"),
            (),
            "From an int8 .tflite (arm_lstm_unidirectional_s16: TensorFlow's 16x8 form at the model's input"
            " and output), batch-major or time-major, hidden and cell state persisting between inferences;"
            " a float .tflite LSTM, calibrated (its state persisting too); or a float ONNX LSTM (each"
            " inference from the zero state). No peepholes, projection or layer norm.",
        ),
    )
}
"""Every IR op: the CMSIS-NN kernels that run it in CMSIS-NN form and what they require."""
