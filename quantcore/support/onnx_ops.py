"""The ONNX operators the importer maps to the IR, each with the constraints CMSIS-NN imposes at import.

These are the limits visible on the ONNX node itself (attributes, ranks, which inputs are constants).
Limits that depend on the CMSIS-NN form of the graph (NHWC, fused activations) are in `kernels`. What
ONNX itself forbids (negative Conv/pool pads, mismatched shapes) is reported by ONNX's checker and shape
inference, as a ModelError naming the node.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from quantcore.display import quoted, shown
from quantcore.ir import Op
from quantcore.support import onnx_lstm
from quantcore.support.table import Constraint, OnnxConstraint, OnnxNode, OpSupport, about

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def _c(*checks: Callable[[OnnxNode], bool]) -> tuple[OnnxConstraint, ...]:
    return tuple(Constraint(check) for check in checks)


# -- what a failing node has ----------------------------------------------------------------------------


def _rank_of_input(node: OnnxNode) -> str:
    rank = node.rank(0)
    return "the rank of its input is unknown" if rank is None else f"its input is {rank}-D"


def _computed_inputs(node: OnnxNode) -> str:
    names = [
        quoted(node.inputs[i])
        for i in range(1, len(node.inputs))
        if node.has_input(i) and not node.is_const(i)
    ]
    return f"its input(s) {', '.join(names)} are computed at run time, not constants"


def _attribute(key: str, default: object) -> Callable[[OnnxNode], str]:
    def describe(node: OnnxNode) -> str:
        value = node.attr(key, default)
        return f"its {key} attribute is {quoted(value) if isinstance(value, str) else shown(repr(value))}"

    return describe


def _extra_outputs(node: OnnxNode) -> str:
    used = [quoted(o) for o, u in zip(node.outputs[1:], node.outputs_used[1:], strict=False) if u]
    return f"its output(s) {', '.join(used)} are read by the graph"


def _matmul_b(node: OnnxNode) -> str:
    b = node.const(1)
    if node.is_const(0):
        return f"its A input {quoted(node.inputs[0])} is a constant"
    return f"its B input {quoted(node.inputs[1])} is " + (
        "computed at run time" if b is None else f"a {b.ndim}-D constant"
    )


def _batchnorm_mode(node: OnnxNode) -> str:
    if any(node.outputs_used[1:]):
        return _extra_outputs(node)
    return f"its training_mode is {node.attr('training_mode', 0)} and its spatial {node.attr('spatial', 1)}"


def _dropout_mode(node: OnnxNode) -> str:
    return _extra_outputs(node) if any(node.outputs_used[1:]) else "its training_mode is true"


def _pads(node: OnnxNode) -> list[int]:
    pads = node.attr("pads", None) if node.opset < 11 else node.const(1)
    return [int(p) for p in pads] if pads is not None else []


# -- shared ---------------------------------------------------------------------------------------------


@about(_rank_of_input)
def input_is_4d(node: OnnxNode) -> bool:
    """Only 2-D spatial layers (a 4-D NCHW input) map to CMSIS-NN's conv and pool kernels; export a 1-D
    layer as a 2-D one with a height of 1 (e.g. Conv2d with kernel (1, k))."""
    return node.rank(0) == 4


@about(_attribute("auto_pad", "NOTSET"))
def auto_pad_known(node: OnnxNode) -> bool:
    """The auto_pad attribute must be NOTSET, SAME_UPPER, SAME_LOWER or VALID."""
    return node.attr("auto_pad", "NOTSET") in AUTO_PADS


@about(_computed_inputs)
def weights_constant(node: OnnxNode) -> bool:
    """The weights and bias must be constants (initializers): CMSIS-NN's kernels read int8 weights and an
    int32 bias baked into Flash, not tensors computed at run time."""
    return all(node.is_const(i) for i in range(1, len(node.inputs)) if node.has_input(i))


# -- Gemm / MatMul --------------------------------------------------------------------------------------


@about(_computed_inputs)
def gemm_b_constant(node: OnnxNode) -> bool:
    """Gemm maps to a fully-connected layer only when B (the weights) and C (the bias) are constants;
    a product of two activations would need arm_batch_matmul_s8, which Fixpoint does not generate."""
    return weights_constant(node)


@about(lambda node: f"its A input {quoted(node.inputs[0])} is a constant")
def gemm_a_not_constant(node: OnnxNode) -> bool:
    """Gemm's A must be the activation; a Gemm whose A is a constant and whose B is an activation has no
    fully-connected form."""
    return not node.is_const(0)


@about(lambda node: f"its C has shape {tuple(getattr(node.const(2), 'shape', ()))}")
def gemm_bias_per_output(node: OnnxNode) -> bool:
    """Gemm's C must be a scalar or one value per output (shape (N,) or (1, N)): CMSIS-NN's
    fully-connected kernels add one int32 bias per output channel, never a per-row bias."""
    c = node.const(2)
    if c is None:
        return True
    n = node.input_shapes[1][0 if node.attr("transB", 0) else 1] if node.input_shapes[1] else None
    return c.size == 1 or (c.size == n and c.ndim <= 2 and c.shape[0] == (1 if c.ndim == 2 else n))


@about(_matmul_b)
def matmul_b_constant_2d(node: OnnxNode) -> bool:
    """MatMul maps to a fully-connected layer only when B is a constant 2-D matrix (the weights); a
    product of two activations would need arm_batch_matmul_s8, which Fixpoint does not generate."""
    b = node.const(1)
    return b is not None and b.ndim == 2 and not node.is_const(0)


@about(lambda node: f"its A is {node.rank(0)}-D")
def matmul_a_2d(node: OnnxNode) -> bool:
    """MatMul's A must be 2-D (batch, features): CMSIS-NN's fully-connected kernels take rows of
    features. Flatten the input to (batch, features) before the layer; for a Linear applied to each
    row of an (N, T, F) tensor, reshape it to (N*T, F) before the Linear and back after it."""
    return node.rank(0) == 2


# -- BatchNormalization ---------------------------------------------------------------------------------


@about(_computed_inputs)
def batchnorm_params_constant(node: OnnxNode) -> bool:
    """BatchNormalization's scale, bias, mean and variance must be constants: CMSIS-NN has no batch-norm
    kernel, so they are folded into the preceding convolution or fully-connected layer."""
    return weights_constant(node)


@about(_batchnorm_mode)
def batchnorm_inference(node: OnnxNode) -> bool:
    """BatchNormalization must be in inference mode (training_mode=0, spatial=1, only its Y output
    used): the running statistics outputs are training artefacts with no CMSIS-NN counterpart."""
    return (
        node.attr("training_mode", 0) == 0 and node.attr("spatial", 1) == 1 and not any(node.outputs_used[1:])
    )


# -- Clip -----------------------------------------------------------------------------------------------


@about(_computed_inputs)
def clip_bounds_constant(node: OnnxNode) -> bool:
    """Clip's min and max must be constants: they become the fixed [act_min, act_max] clamp of the
    producing CMSIS-NN kernel."""
    return all(node.is_const(i) for i in (1, 2) if node.has_input(i))


# -- pooling --------------------------------------------------------------------------------------------


@about(_attribute("dilations", ()))
def pool_dilations_one(node: OnnxNode) -> bool:
    """Pooling with dilations other than 1 has no CMSIS-NN kernel (arm_max_pool_s8 and arm_avgpool_s8 take
    no dilation)."""
    return all(d == 1 for d in node.attr("dilations", ()))


@about(_attribute("storage_order", 0))
def maxpool_storage_order_default(node: OnnxNode) -> bool:
    """MaxPool's storage_order=1 (column-major Indices) is rejected: it only concerns the Indices output,
    which has no CMSIS-NN counterpart."""
    return bool(node.attr("storage_order", 0) == 0)


@about(_extra_outputs)
def maxpool_no_indices(node: OnnxNode) -> bool:
    """MaxPool's Indices output has no CMSIS-NN counterpart (arm_max_pool_s8 returns only the maxima);
    export without return_indices."""
    return not any(node.outputs_used[1:])


# -- ReduceMean, ReduceMax -------------------------------------------------------------------------------

_AXES_INPUT_SINCE = 18
"""The opset from which ReduceMean and ReduceMax take their axes as an input, not an attribute."""
_REDUCES = {"ReduceMean": "averages", "ReduceMax": "takes the maximum"}


def reduce_axes(node: OnnxNode) -> tuple[int, ...] | None:
    """The axes a ReduceMean or ReduceMax node reduces, non-negative and sorted; None when they are
    computed at run time or lie outside the input's rank (or the rank is unknown). No axes means every
    axis, or none at all with noop_with_empty_axes=1."""
    rank = node.rank(0)
    if node.opset >= _AXES_INPUT_SINCE:
        value = node.const(1) if node.has_input(1) else np.zeros(0, np.int64)
        given = None if value is None else [int(a) for a in value.reshape(-1)]
    else:
        given = [int(a) for a in node.attr("axes", None) or []]
    if given is None or rank is None or any(not -rank <= a < rank for a in given):
        return None
    if not given:
        return () if node.attr("noop_with_empty_axes", 0) else tuple(range(rank))
    return tuple(sorted({a % rank for a in given}))


def spatial_axes(node: OnnxNode) -> tuple[int, ...] | None:
    """Of the axes a reduction reduces, those not of size 1 (reducing a single value changes nothing):
    None unless the input is 4-D, they are H, W or both, and the batch dimension stays."""
    axes, shape = reduce_axes(node), node.input_shapes[0]
    if axes is None or shape is None or len(shape) != 4:
        return None
    if 0 in axes and not node.attr("keepdims", 1):
        return None  # the output would have no batch dimension, which every Fixpoint tensor has
    wide = tuple(a for a in axes if shape[a] != 1)
    return wide if set(wide) <= {2, 3} else None


def _reduction(node: OnnxNode) -> str:
    if node.opset >= _AXES_INPUT_SINCE and node.has_input(1) and not node.is_const(1):
        return f"its axes {quoted(node.inputs[1])} are computed at run time, not constants"
    shape, axes = node.input_shapes[0], reduce_axes(node)
    if shape is None:
        return "the shape of its input is unknown"
    if axes is None:
        return f"its axes are outside its {len(shape)}-D input"
    where = f"axes {shown(str(list(axes)))}" if axes else "no axis"
    verb = _REDUCES[node.op_type]
    keep = int(node.attr("keepdims", 1))
    return f"it {verb} over {where} of its {len(shape)}-D input of shape {shape} (keepdims={keep})"


@about(_reduction)
def mean_over_spatial_axes(node: OnnxNode) -> bool:
    """ReduceMean maps to CMSIS-NN only as an average pool: a mean over H, W or both of a 4-D NCHW input
    (axes 2 and 3, or -2 and -1, as an attribute or a constant input; keepdims 0 or 1; an axis of size 1
    counts as either, the batch axis only with keepdims=1). Over H and W it is global average pooling
    (arm_avgpool_s8 with the whole map as its window); CMSIS-NN has no kernel that reduces the batch or
    channel axis. Compute such a mean outside the network, or with a layer that has a kernel (a mean
    over the channels is a 1x1 convolution whose weights are all 1/C)."""
    return spatial_axes(node) is not None


@about(_reduction)
def max_over_spatial_axes(node: OnnxNode) -> bool:
    """ReduceMax maps to CMSIS-NN only as a max pool: a maximum over H, W or both of a 4-D NCHW input
    (axes 2 and 3, or -2 and -1, as an attribute or a constant input; keepdims 0 or 1; an axis of size 1
    counts as either, the batch axis only with keepdims=1), which is arm_max_pool_s8 with that whole
    axis as its window. CMSIS-NN has no kernel that takes the maximum over the batch or channel axis:
    compute it outside the network."""
    return spatial_axes(node) is not None


# -- Pad ------------------------------------------------------------------------------------------------


@about(_attribute("mode", "constant"))
def pad_mode_constant(node: OnnxNode) -> bool:
    """Only constant-mode Pad has a CMSIS-NN counterpart (arm_pad_s8); the 'reflect', 'edge' and 'wrap'
    modes have none. Re-export with constant (zero) padding, or pad in the preprocessing."""
    return bool(node.attr("mode", "constant") == "constant")


@about(_computed_inputs)
def pad_amounts_constant(node: OnnxNode) -> bool:
    """Pad's pads, constant_value and axes must be constants: arm_pad_s8 takes fixed before/after
    amounts and one pad value."""
    return all(node.is_const(i) for i in range(1, len(node.inputs)) if node.has_input(i))


@about(lambda node: f"its pads are {shown(str(_pads(node)))}")
def pad_not_negative(node: OnnxNode) -> bool:
    """Negative Pad amounts crop the tensor; arm_pad_s8 only adds. Re-export without negative pads."""
    return all(p >= 0 for p in _pads(node))


# -- the rest -------------------------------------------------------------------------------------------


@about(_dropout_mode)
def dropout_inference(node: OnnxNode) -> bool:
    """Dropout must be in inference mode (training_mode false, its mask output unused): at inference
    it is the identity; the mask is a training artefact."""
    training = node.const(2)
    return not any(node.outputs_used[1:]) and (training is None or not bool(training.all()))


def _gathered(node: OnnxNode) -> str:
    index, shape = node.const(1), node.input_shapes[0]
    if index is None:
        return f"its indices {quoted(node.inputs[1])} are computed at run time"
    if np.ndim(index) != 0:
        return f"its indices have shape {tuple(np.shape(index))}"
    axis = int(node.attr("axis", 0))
    size = "unknown" if shape is None or not -len(shape) <= axis < len(shape) else shape[axis]
    return f"it gathers along axis {axis}, of size {size}"


@about(_gathered)
def gather_drops_size_one_axis(node: OnnxNode) -> bool:
    """Gather maps only where it drops an axis of size 1 (one constant index on it, e.g. h_n[-1] of a
    one-layer LSTM), a reshape: CMSIS-NN has no slicing/gathering kernel. After an LSTM, read its
    final hidden state h_n or its last step y[:, -1] (both become the layer's last step), or flatten its
    whole output sequence Y into the classifier."""
    index, shape = node.const(1), node.input_shapes[0]
    if index is None or np.ndim(index) != 0 or shape is None:
        return False
    axis = int(node.attr("axis", 0))
    return -len(shape) <= axis < len(shape) and shape[axis] == 1 and int(index) in (0, -1)


@about(lambda node: "both of its inputs are constants")
def binary_has_activation(node: OnnxNode) -> bool:
    """At least one input of an elementwise Add/Mul must be an activation (constant-only arithmetic is
    folded at import)."""
    return not (node.is_const(0) and node.is_const(1))


ONNX_OPS: Mapping[str, OpSupport] = {
    s.op_type: s
    for s in (
        OpSupport(
            "Conv",
            (Op.CONV2D,),
            _c(input_is_4d, weights_constant, auto_pad_known),
            "Groups (grouped and depthwise), dilations, strides; auto_pad resolved to explicit pads "
            "(top, left, bottom, right) from the static input shape.",
        ),
        OpSupport(
            "Gemm",
            (Op.FULLY_CONNECTED, Op.TRANSPOSE),
            _c(gemm_a_not_constant, gemm_b_constant, gemm_bias_per_output),
            "alpha and beta are folded into the weights and bias, transB=0 transposes the weights to "
            "(out, in); transA=1 adds a TRANSPOSE in front.",
        ),
        OpSupport(
            "MatMul",
            (Op.FULLY_CONNECTED,),
            _c(matmul_b_constant_2d, matmul_a_2d),
            "The weights are B transposed to (out, in); a following Add of a constant per-output vector "
            "is folded into the bias.",
        ),
        OpSupport(
            "BatchNormalization",
            (Op.BATCH_NORM,),
            _c(batchnorm_params_constant, batchnorm_inference),
            "Kept as BATCH_NORM for the passes to fold into the preceding layer.",
        ),
        OpSupport("Relu", (Op.RELU,)),
        OpSupport(
            "Clip",
            (Op.CLIP,),
            _c(clip_bounds_constant),
            "min/max are read from attributes (opset < 11) or constant inputs; an absent bound is None.",
        ),
        OpSupport(
            "MaxPool",
            (Op.MAX_POOL,),
            _c(
                input_is_4d,
                auto_pad_known,
                pool_dilations_one,
                maxpool_storage_order_default,
                maxpool_no_indices,
            ),
            "auto_pad and ceil_mode are resolved into explicit pads (ceil_mode adds bottom/right padding, "
            "recorded in ceil_pads) giving ONNX's output size.",
        ),
        OpSupport(
            "AveragePool",
            (Op.AVG_POOL,),
            _c(input_is_4d, auto_pad_known, pool_dilations_one),
            "As MaxPool; count_include_pad is recorded (ceil_mode's extra padding never counts, as in "
            "ONNX Runtime).",
        ),
        OpSupport("GlobalAveragePool", (Op.GLOBAL_AVG_POOL,), _c(input_is_4d)),
        OpSupport(
            "GlobalMaxPool",
            (Op.MAX_POOL,),
            _c(input_is_4d),
            "A MAX_POOL whose window is the whole (H, W).",
        ),
        OpSupport(
            "ReduceMean",
            (Op.GLOBAL_AVG_POOL, Op.AVG_POOL, Op.RESHAPE),
            _c(mean_over_spatial_axes),
            "torch.onnx.export's default (dynamo) exporter writes nn.AdaptiveAvgPool2d(1) and "
            "x.mean((2, 3)) this way. A mean over H and W is GLOBAL_AVG_POOL, over one of them an "
            "AVG_POOL whose window is that whole axis; with keepdims=0 a RESHAPE to the output shape "
            "follows.",
        ),
        OpSupport(
            "ReduceMax",
            (Op.MAX_POOL, Op.RESHAPE),
            _c(max_over_spatial_axes),
            "torch.onnx.export's default (dynamo) exporter writes nn.AdaptiveMaxPool2d(1) and "
            "x.amax((2, 3)) this way: a MAX_POOL whose window is the whole reduced axis (or axes); with "
            "keepdims=0 a RESHAPE to the output shape follows.",
        ),
        OpSupport(
            "Add",
            (Op.ADD,),
            _c(binary_has_activation),
            "A constant operand is put second; numpy broadcasting as in ONNX.",
        ),
        OpSupport("Mul", (Op.MUL,), _c(binary_has_activation), "As Add."),
        OpSupport("Flatten", (Op.RESHAPE,), (), "RESHAPE to the static output shape."),
        OpSupport("Reshape", (Op.RESHAPE,), (), "RESHAPE to the static output shape."),
        OpSupport("Squeeze", (Op.RESHAPE,), (), "RESHAPE to the static output shape."),
        OpSupport("Unsqueeze", (Op.RESHAPE,), (), "RESHAPE to the static output shape."),
        OpSupport(
            "Softmax",
            (Op.SOFTMAX, Op.RESHAPE),
            (),
            "axis is made non-negative; before opset 13 the input is coerced to 2-D at axis, so a softmax "
            "over several trailing axes becomes RESHAPE, SOFTMAX, RESHAPE.",
        ),
        OpSupport("Concat", (Op.CONCAT,), (), "axis is made non-negative."),
        OpSupport(
            "Pad",
            (Op.PAD,),
            _c(pad_mode_constant, pad_amounts_constant, pad_not_negative),
            "pads in ONNX order (all begins, then all ends) over every axis, the axes input expanded; "
            "value is the constant.",
        ),
        OpSupport("Transpose", (Op.TRANSPOSE,), (), "perm defaults to reversing the axes."),
        OpSupport("LSTM", (Op.LSTM, Op.RESHAPE, Op.TRANSPOSE), onnx_lstm.CONSTRAINTS, onnx_lstm.NOTES),
        OpSupport(
            "Gather",
            (Op.RESHAPE,),
            _c(gather_drops_size_one_axis),
            "One index on an axis of size 1 (an LSTM's h_n[-1]): a RESHAPE to the static output shape.",
        ),
        OpSupport("Identity", (Op.IDENTITY,)),
        OpSupport("Dropout", (Op.IDENTITY,), _c(dropout_inference), "The identity at inference."),
        OpSupport("Constant", (), (), "Becomes a constant tensor."),
    )
}
"""Every ONNX operator (default domain) the importer maps. Any node whose inputs are all constants,
whatever its type (Shape-Gather-Concat chains feeding a Reshape, Cast, Constant), is evaluated at import."""
