"""CMSIS-NN's ds_cnn_s as a quantized IR graph: the int8 executor runs it to the vector's output, layer by
layer equal to the conformance network runner, and it has the product's form (parameters that follow from
its scales by the quantizer's formulas, a quant-params document that validates, scratch sizes per core)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from quantcore.codegen.buffers import scratch_bytes
from quantcore.conformance.cases import VectorCase
from quantcore.conformance.network import Network, load_network
from quantcore.conformance.network_graph import CALIBRATION, network_graph
from quantcore.cores import Core
from quantcore.errors import VectorCaseError
from quantcore.ir import DType, Graph, Op
from quantcore.kernels.requantize import Rounding
from quantcore.quantize import params as P
from quantcore.quantize import params_json
from quantcore.quantize.document import to_document
from quantcore.runtime import int8_exec
from tests import needs

SEED = 20240612


@pytest.fixture(scope="module")
def case(vectors: Path) -> VectorCase:
    path = vectors / "arm_ds_cnn_s_s8" / "ds_cnn_s.json"
    if not path.is_file():
        needs.absent(f"{path.name} is not in the vector folder")
    return VectorCase.load(path)


@pytest.fixture(scope="module")
def graph(case: VectorCase) -> Graph:
    return network_graph(case)


@pytest.fixture(scope="module")
def net(case: VectorCase) -> Network:
    return load_network(case)


def _vector_input(case: VectorCase, net: Network) -> np.ndarray:
    return case.raw_array(f"{case.name}_input").reshape(1, *net.input_shape)


def test_the_executor_reproduces_the_vector_output(case: VectorCase, graph: Graph, net: Network) -> None:
    env = int8_exec.run(graph, {graph.inputs[0]: _vector_input(case, net)})
    out = env[graph.outputs[0]]
    expected = case.raw_array(f"{case.name}_output_ref")
    assert out.dtype == np.int8
    assert out.tobytes() == expected.astype(np.int8).tobytes()


@pytest.mark.parametrize("rounding", list(Rounding), ids=lambda r: r.value)
def test_every_layer_equals_the_network_runner(
    case: VectorCase, graph: Graph, net: Network, rounding: Rounding
) -> None:
    noise = np.random.default_rng(SEED).integers(-128, 128, (7, *net.input_shape), dtype=np.int8)
    x = np.concatenate([_vector_input(case, net), noise])
    theirs = net.run(x, rounding)
    # the graph's batch is 1, as a generated program's; the executor runs the batch all the same
    env = int8_exec.run(graph, {graph.inputs[0]: x}, rounding)
    for layer, expected in zip(net.layers, theirs, strict=True):
        ours = env[graph.node(layer.name).outputs[0]]
        assert ours.dtype == expected.dtype == np.int8, layer.name
        assert ours.shape == (len(x), *layer.output_shape), layer.name
        assert np.array_equal(ours, expected), layer.name


def test_nodes_carry_what_the_executor_reads(graph: Graph, net: Network) -> None:
    kernels = [n.attr("kernel") for n in graph.nodes if n.op is not Op.RESHAPE]
    assert kernels == [layer.kind.c_function for layer in net.layers]
    assert graph.meta["rounding"] == "double"
    for node in graph.nodes:
        assert node.attr("kernel") in int8_exec._KERNELS or node.op in int8_exec._MOVES, node.name
        for name in node.inputs[1:]:
            tensor = graph.tensor(name)
            assert tensor.dtype is (DType.INT8 if name.endswith(".weight") else DType.INT32), name
            assert tensor.data is not None and tensor.data.dtype == tensor.dtype.numpy, name
    for tensor in graph.activations():
        assert tensor.dtype is DType.INT8 and tensor.quant is not None, tensor.name


def _qp(graph: Graph, name: str) -> tuple[float, int]:
    quant = graph.tensor(name).quant
    assert quant is not None
    return float(quant.scale), int(quant.zero_point)


def test_the_parameters_follow_from_the_scales_by_the_quantizers_formulas(graph: Graph) -> None:
    checked = 0
    for node in graph.nodes:
        params = node.attr("params")
        if node.op in (Op.CONV2D, Op.DEPTHWISE_CONV2D, Op.FULLY_CONNECTED):
            (s_in, zp_in), (s_out, zp_out) = _qp(graph, node.inputs[0]), _qp(graph, node.outputs[0])
            w = graph.tensor(node.inputs[1]).quant
            assert w is not None
            s_w = np.broadcast_to(np.asarray(w.scale, np.float64), (graph.constant(node.inputs[2]).size,))
            again = P.conv_params(node.name, s_in, zp_in, s_w, s_out, zp_out)
            if node.op is Op.FULLY_CONNECTED:  # per tensor: one multiplier
                again["multiplier"], again["shift"] = again["multiplier"][0], again["shift"][0]
            assert {k: params[k] for k in again} == again, node.name
            checked += 1
        elif node.op is Op.SOFTMAX:
            assert P.softmax_params(_qp(graph, node.inputs[0])[0]) == params
            checked += 1
    assert checked == 11  # nine convolutions, the fully connected layer, the softmax


def test_the_graph_writes_a_quant_params_document_that_validates(graph: Graph) -> None:
    doc = to_document(graph, CALIBRATION)
    assert params_json.validate(doc) == []
    assert params_json.loads(params_json.dump(doc)) == doc


def test_every_node_has_a_scratch_size_on_every_core(graph: Graph) -> None:
    sizes = {core: [scratch_bytes(graph, node, core) for node in graph.nodes] for core in Core}
    assert all(size >= 0 for per_core in sizes.values() for size in per_core)
    first = graph.nodes[0]  # 10x4 kernel on one channel: two int16 im2col columns of 40 off MVE
    assert sizes[Core.HOST][0] == sizes[Core.CORTEX_M4][0] == 2 * 40 * 2, first.name


def test_offsets_that_do_not_chain_are_refused_with_the_layer(case: VectorCase) -> None:
    broken = dataclasses.replace(case, defines={**case.defines, "DEPTHWISE_CONV_2D_2_INPUT_OFFSET": 127})
    with pytest.raises(VectorCaseError, match="layer_2_depthwise_conv_2d: input_offset 127"):
        network_graph(broken)
