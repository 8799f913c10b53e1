"""Whole networks through the code generator, built and run for real on the host and the three QEMU
boards: every layer's bytes equal the reference executor's, and the model output equals the oracle.

Two networks: CMSIS-NN's own ds_cnn_s (its test vector's input and expected output, the strongest
oracle there is), written as a quant-params JSON and generated from that file as from any other; and
a float ONNX model quantized by the product that uses every layer kind the generator emits (residual
add, mul, depthwise, dilated/strided conv, pad, concat, both pools, FC, softmax).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from quantcore.codegen.generate import generate
from quantcore.conformance.cases import VectorCase
from quantcore.conformance.network_graph import CALIBRATION, network_graph
from quantcore.ir import DType, Graph, Tensor
from quantcore.quantize import params_json
from quantcore.quantize.document import from_document, to_document
from quantcore.targets import cmsis_nn, verify
from quantcore.targets.build import BuildRequest, build_firmware
from quantcore.targets.compare import compare
from quantcore.targets.protocol import Transcript
from quantcore.targets.run import run_firmware
from quantcore.targets.target import BUILTIN
from tests import needs
from tests.onnx_models import residual_cnn

TARGETS = ["host", "qemu-m4", "qemu-m7", "qemu-m55"]

RESIDUAL_KERNELS = (
    "arm_convolve_wrapper_s8", "arm_depthwise_conv_wrapper_s8", "arm_elementwise_add_s8",
    "arm_elementwise_mul_s8", "arm_max_pool_s8", "arm_avgpool_s8", "arm_fully_connected_per_channel_s8",
    "arm_softmax_s8", "arm_pad_s8", "arm_concatenation_s8_x",
)  # fmt: skip


@pytest.fixture(scope="module")
def ds_cnn_s(vectors: Path) -> VectorCase:
    path = vectors / "arm_ds_cnn_s_s8" / "ds_cnn_s.json"
    if not path.is_file():
        needs.absent(f"{path.name} is not in the vector folder")
    return VectorCase.load(path)


def _dequantized(tensor: Tensor) -> Tensor:
    """The float tensor a quantizer would have started from: constants at q * scale, no quantization."""
    if tensor.data is None or tensor.quant is None:
        return tensor.evolve(dtype=DType.FLOAT32, quant=None) if tensor.data is None else tensor
    scale = np.asarray(tensor.quant.scale, np.float64)
    shape = [1] * tensor.data.ndim
    if tensor.quant.axis is not None and scale.size > 1:
        shape[tensor.quant.axis] = -1
    values = (tensor.data.astype(np.float64) * scale.reshape(shape)).astype(np.float32)
    return tensor.evolve(dtype=DType.FLOAT32, data=values, quant=None)


@pytest.fixture(scope="module")
def ds_cnn_s_graph(ds_cnn_s: VectorCase, tmp_path_factory: pytest.TempPathFactory) -> Graph:
    """ds_cnn_s through the product's parameter format: its integer graph written as a quant-params JSON,
    loaded back (schema-validated) and applied to the float graph, as `fixpoint generate` does."""
    qgraph = network_graph(ds_cnn_s)
    path = tmp_path_factory.mktemp("ds_cnn_s") / "ds_cnn_s.params.json"
    params_json.write(path, to_document(qgraph, CALIBRATION))
    float_graph = qgraph.evolve(tensors={n: _dequantized(t) for n, t in qgraph.tensors.items()})
    rebuilt = from_document(float_graph, params_json.load(path))
    # Every weight and bias the JSON route re-quantizes is the vector's own integer.
    differing = [
        name for name, t in qgraph.tensors.items()
        if t.data is not None and not np.array_equal(t.data, rebuilt.tensors[name].data)
    ]  # fmt: skip
    assert differing == []
    return rebuilt


@pytest.fixture(scope="module")
def residual(tmp_path_factory: pytest.TempPathFactory) -> tuple[Graph, np.ndarray]:
    """residual_cnn quantized by the product (pipeline.quantize, min/max on seeded data), and test inputs
    in the graph's layout."""
    from quantcore import pipeline
    from quantcore.data import DataSet
    from quantcore.ir.io_layout import to_firmware

    folder = tmp_path_factory.mktemp("residual")
    onnx.save(residual_cnn(), folder / "residual.onnx")
    loaded = pipeline.load_model(folder / "residual.onnx")
    x = np.random.default_rng(3).normal(size=(48, 1, 12, 12)).astype(np.float32)
    result = pipeline.quantize(loaded, DataSet(x[:40]))
    from quantcore.quantize.document import from_document

    qgraph = from_document(loaded.graph, result.document)
    return qgraph, to_firmware(qgraph, qgraph.inputs[0], x[40:])


def _run(
    checkout: cmsis_nn.CmsisNn, qgraph: Graph, cases: verify.Cases, target: str, tmp: Path
) -> Transcript:
    spec = BUILTIN[target]
    src = tmp / "model"
    generate(qgraph, src, core=spec.core)
    firmware = build_firmware(BuildRequest(spec, src, tmp / "build", cases.as_bytes(), checkout))
    return run_firmware(
        firmware, timeout=120, expect=verify.expectation(*verify.reference(qgraph, cases))
    ).transcript


def _assert_every_layer_equal(qgraph: Graph, cases: verify.Cases, transcript: Transcript) -> None:
    layers, output = verify.reference(qgraph, cases)
    comparison = compare(layers, output, transcript)
    differing = {layer.name: layer.mismatched_bytes for layer in comparison.layers if layer.mismatched_bytes}
    assert differing == {} and comparison.outputs_mismatched_bytes == 0
    assert [name for name, _ in transcript.cases[0].layers] == [node.name for node in qgraph.nodes]


@pytest.mark.parametrize("target", TARGETS)
def test_ds_cnn_s_reproduces_cmsis_nn_s_own_expected_output(
    cross: cmsis_nn.CmsisNn, ds_cnn_s: VectorCase, ds_cnn_s_graph: Graph, tmp_path: Path, target: str
) -> None:
    qgraph = ds_cnn_s_graph
    shape = qgraph.tensor(qgraph.inputs[0]).shape[1:]
    vector_input = ds_cnn_s.raw_array(f"{ds_cnn_s.name}_input").astype(np.int8).reshape(1, *shape)
    cases = verify.Cases(vector_input, ds_cnn_s.json_path.name)
    transcript = _run(cross, qgraph, cases, target, tmp_path)
    expected = ds_cnn_s.raw_array(f"{ds_cnn_s.name}_output_ref").astype(np.int8).tobytes()
    assert transcript.cases[0].output == expected
    _assert_every_layer_equal(qgraph, cases, transcript)


@pytest.mark.parametrize("target", TARGETS)
def test_a_product_quantized_model_with_every_layer_kind_runs_bit_exact(
    cross: cmsis_nn.CmsisNn, residual: tuple[Graph, np.ndarray], tmp_path: Path, target: str
) -> None:
    qgraph, x = residual
    cases = verify.data_cases(qgraph, x, "seeded normal inputs", 4)
    transcript = _run(cross, qgraph, cases, target, tmp_path)
    _assert_every_layer_equal(qgraph, cases, transcript)
    model_c = (tmp_path / "model" / "model.c").read_text()
    assert [k for k in RESIDUAL_KERNELS if f"{k}(" not in model_c] == []
    # The inputs are not degenerate: the model output varies over the cases.
    assert len({case.output for case in transcript.cases}) == 4
