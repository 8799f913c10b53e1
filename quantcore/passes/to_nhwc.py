"""NCHW -> NHWC, CMSIS-NN's layout: 4-D activations are transposed, weights re-laid out, axes remapped.

Conv weights become OHWI; a conv with groups == C_in becomes DEPTHWISE_CONV2D with (1, kh, kw, C*m)
weights; a global average pool becomes an average pool over the whole plane. Flattening a 4-D tensor
reads its elements in a different order in NHWC, so for Flatten -> FullyConnected the FC weight columns
are permuted instead (no runtime cost); any other reshape of a 4-D tensor gets an explicit transpose.

Models converted from TensorFlow (tf2onnx) take NHWC inputs and transpose them to NCHW first
(input -> Transpose(perm=[0,3,1,2]) -> Conv), and transpose 4-D outputs back (Transpose(perm=[0,2,3,1])
-> output). Where that is certain - an input read only by such transposes, an output written only by
one - the transposes go: the firmware's NHWC input is then the model's own input, byte for byte, not the
model's input taken as NCHW and permuted again. The layout each input and output has in the model file
is recorded in graph.meta (quantcore/ir/io_layout.py).
"""

from __future__ import annotations

import dataclasses
from itertools import count

import numpy as np

from quantcore.ir import Graph, Layout, Node, Op, QuantParams, Tensor
from quantcore.ir.io_layout import MODEL_LAYOUTS
from quantcore.ir.io_layout import NCHW_TO_NHWC as TO_NHWC
from quantcore.ir.io_layout import NHWC_TO_NCHW as TO_NCHW


def to_nhwc(graph: Graph) -> Graph:
    if any(t.layout is Layout.NHWC for t in graph.tensors.values()):
        return graph
    graph = _adopt_nhwc_io(graph)
    four_d = {n for n, t in graph.tensors.items() if not t.is_constant and len(t.shape) == 4}
    tensors = {
        n: t.evolve(shape=tuple(t.shape[i] for i in TO_NHWC), layout=Layout.NHWC) if n in four_d else t
        for n, t in graph.tensors.items()
    }
    new = graph.evolve(tensors=tensors)
    fresh = count()
    nodes: list[Node] = []
    for node in graph.nodes:
        rewritten, new = _rewrite(graph, new, node, four_d, fresh)
        nodes.extend(rewritten)
    return new.evolve(nodes=nodes, meta={**graph.meta, "layout": "NHWC"}).prune()


def _adopt_nhwc_io(graph: Graph) -> Graph:
    """Drop the transposes a TensorFlow-converted model wraps its NHWC inputs and outputs in.

    The NHWC input then takes the place of the transposed (NCHW) tensor it fed, declared with that
    tensor's NCHW shape, so that the conversion below gives it back its own NHWC shape; likewise an
    output takes the place of the NCHW tensor it was transposed from. graph.meta[MODEL_LAYOUTS] records
    every 4-D input's and output's layout in the model file."""
    layouts: dict[str, str] = {}
    for name in graph.inputs:
        if len(graph.tensor(name).shape) == 4:
            graph, layouts[name] = _nhwc_input(graph, name)
    for name in graph.outputs:
        if len(graph.tensor(name).shape) == 4 and name not in layouts:
            graph, layouts[name] = _nhwc_output(graph, name)
    return graph.evolve(meta={**graph.meta, MODEL_LAYOUTS: layouts})


def _nhwc_input(graph: Graph, name: str) -> tuple[Graph, str]:
    """`name` read only by Transpose(perm=[0,3,1,2]) nodes: drop them, `name` is NHWC."""
    readers = graph.consumers(name)
    if not readers or not all(_is_transpose(n, TO_NCHW) for n in readers):
        return graph, Layout.NCHW.value
    if any(n.outputs[0] in graph.outputs for n in readers):
        return graph, Layout.NCHW.value  # a transposed copy of the input is itself an output
    nchw = graph.tensor(readers[0].outputs[0]).shape
    graph = graph.evolve(nodes=[n for n in graph.nodes if n not in readers])
    for reader in readers:
        graph = graph.rename_tensor_uses(reader.outputs[0], name)
    return graph.with_tensors(graph.tensor(name).evolve(shape=nchw, layout=Layout.NCHW)), Layout.NHWC.value


def _nhwc_output(graph: Graph, name: str) -> tuple[Graph, str]:
    """`name` written by Transpose(perm=[0,2,3,1]) of a tensor nothing else reads: the transpose goes and
    that tensor's producer writes `name`, which is NHWC."""
    writer = graph.producer(name)
    if writer is None or not _is_transpose(writer, TO_NHWC):
        return graph, Layout.NCHW.value
    source = writer.inputs[0]
    producer = graph.producer(source)
    if producer is None or len(graph.consumers(source)) != 1 or source in graph.outputs:
        return graph, Layout.NCHW.value
    nchw = graph.tensor(source).shape
    nodes = [
        n.evolve(outputs=tuple(name if o == source else o for o in n.outputs)) if n is producer else n
        for n in graph.nodes
        if n is not writer
    ]
    tensors = {k: v for k, v in graph.tensors.items() if k != source}
    tensors[name] = graph.tensor(name).evolve(shape=nchw, layout=Layout.NCHW)
    return graph.evolve(nodes=nodes, tensors=tensors), Layout.NHWC.value


def _is_transpose(node: Node, perm: tuple[int, ...]) -> bool:
    return node.op is Op.TRANSPOSE and tuple(int(a) for a in node.attr("perm", ())) == perm


def _rewrite(
    old: Graph, new: Graph, node: Node, four_d: set[str], fresh: count[int]
) -> tuple[list[Node], Graph]:
    x = node.inputs[0] if node.inputs else ""
    if node.op is Op.CONV2D:
        return _conv(old, new, node)
    if node.op is Op.GLOBAL_AVG_POOL:
        _, _, h, w = old.tensor(x).shape
        attrs = {"kernel": (h, w), "strides": (1, 1), "pads": (0, 0, 0, 0), "count_include_pad": False}
        return [Node(node.name, Op.AVG_POOL, node.inputs, node.outputs, attrs)], new
    if node.op in (Op.SOFTMAX, Op.CONCAT) and x in four_d:
        return [node.with_attrs(axis=TO_NHWC.index(node.attr("axis")))], new
    if node.op is Op.PAD and x in four_d:
        pads = node.attr("pads")
        return [
            node.with_attrs(pads=tuple(pads[i] for i in TO_NHWC) + tuple(pads[4 + i] for i in TO_NHWC))
        ], new
    if node.op in (Op.ADD, Op.MUL):
        return [node], _broadcast_constants_nhwc(new, node)
    if node.op is Op.RESHAPE and (x in four_d or node.outputs[0] in four_d):
        return _reshape(old, new, node, four_d, fresh)
    if node.op is Op.TRANSPOSE and (x in four_d or node.outputs[0] in four_d):
        return [
            node.with_attrs(perm=_transpose_perm(node.attr("perm"), x in four_d, node.outputs[0] in four_d))
        ], new
    return [node], new


def _conv(old: Graph, new: Graph, node: Node) -> tuple[list[Node], Graph]:
    w = old.constant(node.inputs[1])
    c_in = old.tensor(node.inputs[0]).shape[1]
    groups = node.attr("groups", 1)
    name = f"{node.name}.weight.nhwc"
    if groups > 1 and groups == c_in and w.shape[1] == 1:
        dw = w.transpose(1, 2, 3, 0)  # (C*m, 1, kh, kw) -> (1, kh, kw, C*m): channel c*m+j reads input c
        quant = _moved_axis(old.tensor(node.inputs[1]).quant, 3)
        new = new.with_tensors(Tensor(name, dw.shape, data=np.ascontiguousarray(dw), quant=quant))
        attrs = {k: v for k, v in node.attrs.items() if k != "groups"}
        attrs["kernel"] = dw.shape[1:3]
        return [
            Node(node.name, Op.DEPTHWISE_CONV2D, (node.inputs[0], name, node.inputs[2]), node.outputs, attrs)
        ], new
    ohwi = np.ascontiguousarray(w.transpose(0, 2, 3, 1))
    new = new.with_tensors(Tensor(name, ohwi.shape, data=ohwi, quant=old.tensor(node.inputs[1]).quant))
    return [node.evolve(inputs=(node.inputs[0], name, node.inputs[2]))], new


def _moved_axis(quant: QuantParams | None, axis: int) -> QuantParams | None:
    """Scales imported with the weights (QDQ) follow them; the output-channel axis moves."""
    if quant is None or quant.axis is None:
        return quant
    return dataclasses.replace(quant, axis=axis)


def _broadcast_constants_nhwc(graph: Graph, node: Node) -> Graph:
    """A constant operand broadcasting against a 4-D NCHW tensor is re-laid out the same way."""
    for name in node.inputs:
        tensor = graph.tensor(name)
        out = graph.tensor(node.outputs[0])
        if tensor.data is None or out.layout is not Layout.NHWC or tensor.data.ndim < 2:
            continue
        data = tensor.data.reshape((1,) * (4 - tensor.data.ndim) + tensor.data.shape).transpose(TO_NHWC)
        graph = graph.with_tensors(tensor.evolve(shape=data.shape, data=np.ascontiguousarray(data)))
    return graph


def _reshape(
    old: Graph, new: Graph, node: Node, four_d: set[str], fresh: count[int]
) -> tuple[list[Node], Graph]:
    x, y = node.inputs[0], node.outputs[0]
    shape = old.tensor(x).shape
    if x in four_d and y not in four_d and shape[2] * shape[3] == 1:
        return [node], new  # (N, C, 1, 1) flattens to the same order in both layouts
    consumers = old.consumers(y)
    if x in four_d and len(shape) == 4 and len(node.attr("shape")) == 2 and _only_fc(consumers, y, old):
        return [node], _permute_fc_columns(old, new, consumers[0], shape)
    nodes = []
    src = x
    if x in four_d:  # restore NCHW element order, reshape as the model did
        src = f"{x}.nchw{next(fresh)}"
        new = new.with_tensors(Tensor(src, shape, layout=Layout.NCHW))
        nodes.append(Node(f"{node.name}.to_nchw", Op.TRANSPOSE, (x,), (src,), {"perm": TO_NCHW}))
    if y in four_d:
        tmp = f"{y}.nchw{next(fresh)}"
        new = new.with_tensors(Tensor(tmp, old.tensor(y).shape, layout=Layout.NCHW))
        nodes.append(node.evolve(inputs=(src,), outputs=(tmp,)))
        nodes.append(Node(f"{node.name}.to_nhwc", Op.TRANSPOSE, (tmp,), (y,), {"perm": TO_NHWC}))
    else:
        nodes.append(node.evolve(inputs=(src,)))
    return nodes, new


def _only_fc(consumers: list[Node], y: str, graph: Graph) -> bool:
    return len(consumers) == 1 and consumers[0].op is Op.FULLY_CONNECTED and y not in graph.outputs


def _permute_fc_columns(old: Graph, new: Graph, fc: Node, nchw_shape: tuple[int, ...]) -> Graph:
    """FC weights read a flattened NHWC tensor: column j must be the NCHW column of the same element."""
    _, c, h, w = nchw_shape
    nchw_index = np.arange(c * h * w).reshape(c, h, w).transpose(1, 2, 0).ravel()
    weights = old.constant(fc.inputs[1])
    tensor = new.tensor(fc.inputs[1])
    return new.with_tensors(tensor.evolve(data=np.ascontiguousarray(weights[:, nchw_index])))


def _transpose_perm(perm: tuple[int, ...], in_nhwc: bool, out_nhwc: bool) -> tuple[int, ...]:
    """The perm on NHWC data equivalent to `perm` on NCHW data.

    Uses x.transpose(a).transpose(b) == x.transpose(a[b]).
    """
    p = np.asarray(perm)
    if in_nhwc:
        p = np.asarray(TO_NCHW)[p]
    if out_nhwc:
        p = p[list(TO_NHWC)]
    return tuple(int(i) for i in p)
