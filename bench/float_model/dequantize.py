"""The float network of a quantized graph that has no float model (CMSIS-NN's ds_cnn_s test network).

Constants become q * scale per tensor or per channel (as tests/targets/test_network.py's _dequantized),
minus the zero point where there is one; activations become float32 with no quantization. The int8
graph's node attrs "kernel" (a CMSIS-NN function name) and "params" go; what float_exec needs of them
comes back in float terms: a pool's window from params["kernel"], and the kernel's [act_min, act_max]
output clamp as the fused activation, in real units ((q - zero_point) * scale): CLIP (RELU6 for [0, 6]).

The clamp is kept whole, the int8 range's own ends included, so the float graph is the int8 network's
real-valued function without its rounding: s_in * s_w * (the int8 accumulator) + bias, clamped where the
int8 kernel clamps. For ds_cnn_s those ends matter: every hidden layer's range is exactly the int8 range
(zero point -128, so [0, 255] in its nominal units) and 1-6% of its outputs on the vector's input sit at
the top; the integers cannot tell a ReLU6 whose cap the calibration put at 127 from a plain ReLU
saturating, and dropping the cap (a plain ReLU) moves the vector's float output to another class.
"""

from __future__ import annotations

import math

import numpy as np

from quantcore.ir import Activation, DType, Graph, Node, Op, Tensor

_CLAMPED = (Op.CONV2D, Op.DEPTHWISE_CONV2D, Op.FULLY_CONNECTED, Op.MAX_POOL, Op.AVG_POOL, Op.ADD, Op.MUL)


def dequantized_tensor(tensor: Tensor) -> Tensor:
    if tensor.data is None:
        return tensor.evolve(dtype=DType.FLOAT32, quant=None)
    if tensor.quant is None:
        return tensor.evolve(dtype=DType.FLOAT32, data=tensor.data.astype(np.float32))
    shape = [1] * tensor.data.ndim
    if tensor.quant.axis is not None:
        shape[tensor.quant.axis] = -1
    scale = np.asarray(tensor.quant.scale, np.float64)
    zero = np.asarray(tensor.quant.zero_point, np.float64)
    scale = scale.reshape(shape) if scale.size > 1 else scale
    zero = zero.reshape(shape) if zero.size > 1 else zero
    values = ((tensor.data.astype(np.float64) - zero) * scale).astype(np.float32)
    return tensor.evolve(dtype=DType.FLOAT32, data=values, quant=None)


def _activation(node: Node, qgraph: Graph) -> dict[str, object]:
    params = node.attr("params") or {}
    if "act_min" not in params or "act_max" not in params:
        return {}
    quant = qgraph.tensor(node.outputs[0]).quant
    if quant is None or np.size(quant.scale) != 1 or np.size(quant.zero_point) != 1:
        return {}
    scale, zero = float(np.asarray(quant.scale)), float(np.asarray(quant.zero_point))
    lo = (int(params["act_min"]) - zero) * scale
    hi = (int(params["act_max"]) - zero) * scale
    if lo == 0.0 and math.isclose(hi, 6.0, rel_tol=1e-6):
        return {"activation": Activation.RELU6}
    return {"activation": Activation.CLIP, "clip": (lo, hi)}


def dequantized_graph(qgraph: Graph) -> Graph:
    """The float graph `qgraph` was (or would have been) quantized from, for float_exec and generate_float."""
    nodes = []
    for node in qgraph.nodes:
        attrs = {k: v for k, v in node.attrs.items() if k not in ("kernel", "params")}
        params = node.attr("params") or {}
        if node.op in (Op.MAX_POOL, Op.AVG_POOL):
            kernel = params.get("kernel", node.attr("kernel"))
            attrs["kernel"] = tuple(int(k) for k in kernel)
        if node.op is Op.DEPTHWISE_CONV2D:
            attrs["kernel"] = tuple(int(d) for d in qgraph.constant(node.inputs[1]).shape[1:3])
        if node.op in _CLAMPED:
            attrs.update(_activation(node, qgraph))
        nodes.append(node.evolve(attrs=attrs))
    tensors = {name: dequantized_tensor(t) for name, t in qgraph.tensors.items()}
    return qgraph.evolve(tensors=tensors, nodes=nodes).verify()
