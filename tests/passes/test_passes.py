"""The passes keep the float function of a model and produce the CMSIS-NN form of the graph."""

from __future__ import annotations

import numpy as np
import pytest

from quantcore.ir import Activation, Graph, Layout, Op
from quantcore.passes import prepare
from quantcore.passes.fold_bn import fold_batch_norm
from quantcore.passes.fuse_activation import fuse_activations
from quantcore.runtime.float_exec import run
from tests.ir_builder import GraphBuilder


def _outputs(graph: Graph, x_nchw: np.ndarray) -> np.ndarray:
    x = x_nchw.transpose(0, 2, 3, 1) if graph.tensor("input").layout is Layout.NHWC else x_nchw
    out = run(graph, {"input": x}, keep=False)[graph.outputs[0]]
    return out.transpose(0, 3, 1, 2) if graph.tensor(graph.outputs[0]).layout is Layout.NHWC else out


def _same_function(before: Graph, after: Graph, shape: tuple[int, ...]) -> None:
    x = np.random.default_rng(9).normal(size=(3, *shape[1:]))
    # Folded weights are stored as float32, like the model's own: differences of float32 rounding.
    np.testing.assert_allclose(_outputs(after, x), _outputs(before, x), rtol=1e-5, atol=1e-6)


def _cnn() -> Graph:
    b = GraphBuilder((1, 3, 12, 12))
    b.conv(8, 3, pad=1).bn().relu().pool(Op.MAX_POOL, 2, 2)
    b.conv(16, 3, pad=1, groups=8).bn().clip(0.0, 6.0)  # depthwise with channel multiplier 2
    b.conv(6, 1).relu().gap().flatten().fc(4).softmax()
    return b.build()


def test_cnn_becomes_the_cmsis_nn_form() -> None:
    prepared = prepare(_cnn())
    ops = [(n.op, n.attr("activation", Activation.NONE)) for n in prepared.nodes]
    assert ops == [
        (Op.CONV2D, Activation.RELU),
        (Op.MAX_POOL, Activation.NONE),
        (Op.DEPTHWISE_CONV2D, Activation.RELU6),
        (Op.CONV2D, Activation.RELU),
        (Op.AVG_POOL, Activation.NONE),
        (Op.RESHAPE, Activation.NONE),
        (Op.FULLY_CONNECTED, Activation.NONE),
        (Op.SOFTMAX, Activation.NONE),
    ]
    assert prepared.tensor("input").shape == (1, 12, 12, 3)
    dw = prepared.nodes[2]
    assert prepared.constant(dw.inputs[1]).shape == (1, 3, 3, 16)
    assert prepared.nodes[4].attr("kernel") == (6, 6)


def test_cnn_function_is_preserved() -> None:
    graph = _cnn()
    _same_function(graph, prepare(graph), graph.tensor("input").shape)


def test_flatten_of_a_spatial_tensor_permutes_fc_columns_instead_of_transposing() -> None:
    b = GraphBuilder((1, 2, 3, 4), seed=1)
    graph = b.conv(5, 1).relu().flatten().fc(3).build()
    prepared = prepare(graph)
    assert [n.op for n in prepared.nodes] == [Op.CONV2D, Op.RESHAPE, Op.FULLY_CONNECTED]
    _same_function(graph, prepared, (1, 2, 3, 4))


def test_bn_folding_formula() -> None:
    b = GraphBuilder((1, 1, 3, 3), seed=2)
    graph = b.conv(2, 1).bn().build()
    conv, bn = graph.nodes
    folded = fold_batch_norm(graph)
    [node] = folded.nodes
    g, beta, mean, var = (graph.constant(i) for i in bn.inputs[1:])
    k = g / np.sqrt(var + 1e-5)
    np.testing.assert_allclose(
        folded.constant(node.inputs[1]), graph.constant(conv.inputs[1]) * k[:, None, None, None], rtol=1e-6
    )
    np.testing.assert_allclose(
        folded.constant(node.inputs[2]), (graph.constant(conv.inputs[2]) - mean) * k + beta, rtol=1e-6
    )
    assert node.outputs == bn.outputs


def test_batchnorm_without_a_conv_becomes_a_depthwise_1x1() -> None:
    b = GraphBuilder((1, 3, 4, 4), seed=3)
    graph = b.bn().relu().build()
    prepared = prepare(graph)
    assert [(n.op, n.attr("activation")) for n in prepared.nodes] == [(Op.DEPTHWISE_CONV2D, Activation.RELU)]
    _same_function(graph, prepared, (1, 3, 4, 4))


def test_activation_is_not_fused_into_a_producer_with_other_readers() -> None:
    b = GraphBuilder((1, 2, 4, 4), seed=4)
    b.conv(2, 1)
    shortcut = b.current
    graph = b.relu().add(shortcut).build()
    fused = fuse_activations(graph)
    assert [n.op for n in fused.nodes] == [Op.CONV2D, Op.RELU, Op.ADD]
    _same_function(graph, prepare(graph), (1, 2, 4, 4))


@pytest.mark.parametrize(
    ("lo", "hi", "kind"),
    [(0.0, 6.0, Activation.RELU6), (0.0, None, Activation.RELU), (-1.0, 1.0, Activation.CLIP)],
)
def test_clip_fuses_as_the_matching_activation(lo: float, hi: float | None, kind: Activation) -> None:
    graph = GraphBuilder((1, 2, 4, 4), seed=5).conv(2, 1).clip(lo, hi).build()
    [node] = fuse_activations(graph).nodes
    assert node.attr("activation") is kind
    if kind is Activation.CLIP:
        assert node.attr("clip") == (-1.0, 1.0)
    _same_function(graph, prepare(graph), (1, 2, 4, 4))
