"""BatchNorm folding: W' = W * g/sqrt(v+e) per output channel, b' = (b - m) * g/sqrt(v+e) + beta.

Folding happens before any statistics are taken (DOMAIN.md section 3). A BatchNorm whose producer is not
a conv/fc with no other reader becomes a 1x1 depthwise convolution (per-channel scale and shift), which
CMSIS-NN can run; it never stays a BATCH_NORM.
"""

from __future__ import annotations

import numpy as np

from quantcore.ir import Activation, Graph, Node, Op, Tensor

_FOLDABLE = (Op.CONV2D, Op.DEPTHWISE_CONV2D, Op.FULLY_CONNECTED)


def fold_batch_norm(graph: Graph) -> Graph:
    for bn in [n for n in graph.nodes if n.op is Op.BATCH_NORM]:
        graph = _fold_one(graph, graph.node(bn.name))
    return graph.prune()


def _scale_shift(graph: Graph, bn: Node) -> tuple[np.ndarray, np.ndarray]:
    gamma, beta, mean, var = (graph.constant(i).astype(np.float64) for i in bn.inputs[1:5])
    k = gamma / np.sqrt(var + bn.attr("epsilon", 1e-5))
    return k, beta - mean * k


def _fold_one(graph: Graph, bn: Node) -> Graph:
    k, shift = _scale_shift(graph, bn)
    producer = graph.producer(bn.inputs[0])
    foldable = (
        producer is not None
        and producer.op in _FOLDABLE
        and producer.attr("activation", Activation.NONE) is Activation.NONE
        and len(graph.consumers(bn.inputs[0])) == 1
        and bn.inputs[0] not in graph.outputs
    )
    if not foldable or producer is None:
        return _as_depthwise(graph, bn, k, shift)
    w = graph.constant(producer.inputs[1]).astype(np.float64)
    # The output-channel axis: 0 for OIHW / OHWI / (out, in); 3 for depthwise (1, kh, kw, C*m).
    axis = 3 if producer.op is Op.DEPTHWISE_CONV2D else 0
    shape = [1] * w.ndim
    shape[axis] = -1
    new_w = w * k.reshape(shape)
    bias = graph.constant(producer.inputs[2]).astype(np.float64) if producer.inputs[2] else np.zeros(len(k))
    new_b = bias * k + shift
    w_name, b_name = f"{producer.name}.weight", f"{producer.name}.bias"
    graph = graph.with_tensors(
        Tensor(w_name, tuple(new_w.shape), data=new_w.astype(np.float32)),
        Tensor(b_name, (len(new_b),), data=new_b.astype(np.float32)),
    )
    folded = producer.evolve(inputs=(producer.inputs[0], w_name, b_name), outputs=bn.outputs)
    return graph.replace_node(producer, [folded]).replace_node(graph.node(bn.name), [])


def _as_depthwise(graph: Graph, bn: Node, k: np.ndarray, shift: np.ndarray) -> Graph:
    if len(graph.tensor(bn.inputs[0]).shape) != 4:
        return graph  # left as BATCH_NORM: the support check reports it with its reason
    w_name, b_name = f"{bn.name}.weight", f"{bn.name}.bias"
    graph = graph.with_tensors(
        Tensor(w_name, (1, 1, 1, len(k)), data=k.reshape(1, 1, 1, -1).astype(np.float32)),
        Tensor(b_name, (len(k),), data=shift.astype(np.float32)),
    )
    dw = Node(bn.name, Op.DEPTHWISE_CONV2D, (bn.inputs[0], w_name, b_name), bn.outputs, {"kernel": (1, 1)})
    return graph.replace_node(bn, [dw])
