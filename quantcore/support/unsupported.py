"""ONNX operators with no CMSIS-NN counterpart, each with the reason and, where there is one, the way out.

Checked against CMSIS-NN's Include/arm_nnfunctions.h (v7.0.0 + 43 commits): the int8 ("s8") kernels are
convolutions (plain, 1x1, 1xN, grouped, depthwise, transposed), fully connected, batch matmul,
elementwise add/mul, minimum/maximum, relu/relu6, average/max pool, softmax, SVDF, LSTM, pad, transpose,
reshape and concatenation. Anything else here has no kernel, or has one Fixpoint does not map yet (said so).
"""

from __future__ import annotations

from collections.abc import Mapping

from quantcore.display import quoted, shown

_SIGMOID = (
    "CMSIS-NN has no int8 sigmoid/tanh kernel: its only one is arm_nn_activation_s16 (int16 input and "
    "output, a 256-entry sigmoid LUT, tanh as 2*sigmoid(2x)-1; TFLite Micro's s16 LOGISTIC/TANH), and "
    "Fixpoint does not yet run a layer in int16 around it. Replace it (e.g. with ReLU6 or a Clip) and "
    "retrain."
)
_NORM = (
    "CMSIS-NN has no normalization kernel; of the normalizations only an inference BatchNormalization "
    "is supported (folded into the convolution or fully-connected layer before it, or else run as a "
    "depthwise 1x1 convolution), since its statistics are constants. Replace the layer with BatchNorm "
    "and retrain."
)
_NO_ACTIVATION = (
    "CMSIS-NN's int8 kernels have no such activation (only ReLU, ReLU6 and a [min, max] clamp, fused "
    "into the producing layer). Replace it with ReLU/ReLU6/Clip and retrain."
)
_QOPERATOR = (
    "this is a QOperator-format quantized model; Fixpoint imports float models and QDQ models. "
    "Quantize with onnxruntime's quant_format=QuantFormat.QDQ, or import the float model."
)
_CONTROL_FLOW = (
    "control flow has no CMSIS-NN counterpart; export a graph without data-dependent branches or loops "
    "(no torch.cond or scripted modules: torch.onnx.export unrolls plain Python loops and ifs)."
)
_REDUCE = (
    "CMSIS-NN has no reduction kernel for it (its pools compute only the mean and the maximum of a "
    "window, which is how ReduceMean and ReduceMax over H and W are mapped); compute it outside the "
    "network."
)
_SLICING = (
    "CMSIS-NN has no slicing/gathering kernel; a split of channels can usually be expressed as separate "
    "convolutions, or done outside the network. After an LSTM, feed its whole output sequence to the "
    "classifier (flatten Y), its final hidden state h_n (`_, (h, c) = lstm(x)`, then h[-1]) or its last "
    "step y[:, -1]."
)

NO_COUNTERPART: Mapping[str, str] = {
    "GRU": "CMSIS-NN has no GRU kernel (its recurrent kernels are LSTM and SVDF only).",
    "RNN": "CMSIS-NN has no simple-RNN kernel (its recurrent kernels are LSTM and SVDF only).",
    "Resize": (
        "CMSIS-NN has no resize/upsampling kernel (TFLite Micro's RESIZE_NEAREST_NEIGHBOR is not part of "
        "it); resize outside the network or design the network without upsampling."
    ),
    "Upsample": "CMSIS-NN has no resize/upsampling kernel; Upsample is also deprecated ONNX (use Resize).",
    "ConvTranspose": (
        "CMSIS-NN has arm_transpose_conv_s8, but Fixpoint does not map ONNX ConvTranspose to it yet."
    ),
    "LayerNormalization": _NORM,
    "InstanceNormalization": _NORM,
    "GroupNormalization": _NORM,
    "LpNormalization": _NORM,
    "LRN": "CMSIS-NN has no local-response-normalization kernel.",
    "Sigmoid": _SIGMOID,
    "Tanh": _SIGMOID,
    "HardSigmoid": _NO_ACTIVATION,
    "HardSwish": _NO_ACTIVATION,
    "LeakyRelu": _NO_ACTIVATION,
    "PRelu": _NO_ACTIVATION,
    "Elu": _NO_ACTIVATION,
    "Selu": _NO_ACTIVATION,
    "Celu": _NO_ACTIVATION,
    "Gelu": _NO_ACTIVATION,
    "Mish": _NO_ACTIVATION,
    "Softplus": _NO_ACTIVATION,
    "Softsign": _NO_ACTIVATION,
    "ThresholdedRelu": _NO_ACTIVATION,
    "LogSoftmax": "CMSIS-NN has softmax kernels (arm_softmax_s8) but no log-softmax; use Softmax.",
    "Hardmax": "CMSIS-NN has no hardmax kernel; use Softmax and take the arg-max on the host side.",
    "Sub": (
        "CMSIS-NN has no int8 subtraction kernel (only arm_elementwise_add_s8 and _mul_s8): move the "
        "subtraction of a constant into the preprocessing or into the previous layer's bias; a difference "
        "of two tensors computed at run time has no CMSIS-NN counterpart."
    ),
    "Div": (
        "CMSIS-NN has no division kernel: move a division by a constant into the preprocessing or into the "
        "previous layer's weights and bias; a division by a tensor computed at run time has no CMSIS-NN "
        "counterpart."
    ),
    "Min": "CMSIS-NN has arm_minimum_s8, but Fixpoint does not map ONNX Min to it yet.",
    "Max": "CMSIS-NN has arm_maximum_s8, but Fixpoint does not map ONNX Max to it yet.",
    "ReduceSum": (
        "CMSIS-NN has no reduction kernel. A sum over H and W (axes 2 and 3 of a 4-D NCHW tensor) is "
        "H*W times their mean, which maps to an average pool: use x.mean((2, 3)) and multiply the weights "
        "of the layer that reads it by H*W. A sum over the batch or channel axis has no CMSIS-NN "
        "counterpart; compute it outside the network."
    ),
    "ReduceMin": _REDUCE,
    "ReduceProd": _REDUCE,
    "ArgMax": "CMSIS-NN has no arg-max kernel; take the arg-max of the output on the host side.",
    "ArgMin": "CMSIS-NN has no arg-min kernel; take it on the host side.",
    "TopK": "CMSIS-NN has no top-k kernel; take it on the host side.",
    "Slice": _SLICING,
    "Split": _SLICING,
    "Einsum": "CMSIS-NN has no einsum kernel; export the product as a MatMul/Gemm with constant weights.",
    "Attention": "CMSIS-NN has no attention kernel.",
    "If": _CONTROL_FLOW,
    "Loop": _CONTROL_FLOW,
    "Scan": _CONTROL_FLOW,
    "QLinearConv": _QOPERATOR,
    "QLinearMatMul": _QOPERATOR,
    "ConvInteger": _QOPERATOR,
    "MatMulInteger": _QOPERATOR,
}
"""ONNX operator type (default domain) -> why CMSIS-NN cannot run it and what to do instead."""


def unsupported_reason(op_type: str, domain: str = "") -> str:
    """The reason an ONNX operator cannot be imported, for any type the importer does not map."""
    if domain not in ("", "ai.onnx"):
        return f"operators of the {quoted(domain)} domain have no CMSIS-NN counterpart; export standard ONNX"
    return NO_COUNTERPART.get(
        op_type,
        f"CMSIS-NN has no kernel for ONNX {shown(op_type)}, and Fixpoint has no rewrite of it into supported"
        " ops.",
    )
