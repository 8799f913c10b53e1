"""Int8 .tflite models from TensorFlow Lite Micro's repository: Fixpoint's int8 reference executor (the
bit-exact CMSIS-NN kernels, what `fixpoint evaluate` runs) against TFLM's own interpreter (reference
kernels) on the same int8 inputs - every layer output TFLM keeps, and the model output, byte for byte;
and the weights and biases the params JSON holds are TensorFlow's integers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tflite

from quantcore import pipeline
from quantcore.importers._tflite_read import read_model
from quantcore.quantize.consistency import problems
from quantcore.runtime import int8_exec
from tests import tflm

INT8_MODELS = ["hello_world_int8", "micro_speech_quantized", "person_detect"]
CASES = 8


def _tensor_indices(path: Path) -> dict[str, int]:
    model = tflite.Model.GetRootAsModel(path.read_bytes(), 0).Subgraphs(0)
    return {model.Tensors(i).Name().decode(): i for i in range(model.TensorsLength())}


@pytest.fixture(scope="module", params=INT8_MODELS)
def imported(request: pytest.FixtureRequest) -> tuple[Path, pipeline.QuantizeResult]:
    path = tflm.model(request.param)
    return path, pipeline.quantize_imported(pipeline.load_model(path))


def test_every_layer_matches_tflm_byte_for_byte(imported: tuple[Path, pipeline.QuantizeResult]) -> None:
    path, result = imported
    qgraph = result.qgraph
    interpreter = tflm.interpreter(path)
    shape = interpreter.get_input_details(0)["shape"]
    indices = _tensor_indices(path)
    compared = {n.outputs[0] for n in qgraph.nodes if n.outputs[0] in indices}
    assert qgraph.outputs[0] in compared and len(compared) >= len(qgraph.nodes) - 1
    rng = np.random.default_rng(18)
    differing: dict[str, int] = {}
    for _ in range(CASES):
        x = rng.integers(-128, 128, size=shape, dtype=np.int8)
        interpreter.set_input(x, 0)
        interpreter.invoke()
        env = int8_exec.run(qgraph, {qgraph.inputs[0]: x})
        for name in compared:
            theirs = interpreter.GetTensor(indices[name], 0)["tensor_data"]
            ours = env[name].reshape(theirs.shape)
            differing[name] = differing.get(name, 0) + int(np.count_nonzero(ours != theirs))
        output = interpreter.get_output(0)
        assert np.array_equal(env[qgraph.outputs[0]].reshape(output.shape), output)
    assert differing == dict.fromkeys(compared, 0)


def test_weights_biases_and_scales_are_tensorflows(imported: tuple[Path, pipeline.QuantizeResult]) -> None:
    path, result = imported
    model = read_model(path.read_bytes(), str(path))
    by_output = {model.tensors[op.outputs[0]].name: op for op in model.operators}
    qgraph = result.qgraph
    layers = [n for n in qgraph.nodes if n.attr("kernel") and len(n.inputs) == 3]
    assert layers
    for node in layers:
        op = by_output[node.outputs[0]]
        weights, bias = (model.tensors[i] for i in op.inputs[1:3])
        assert np.array_equal(qgraph.constant(node.inputs[1]), weights.data), node.name
        assert np.array_equal(qgraph.constant(node.inputs[2]), bias.data), node.name
        for index in (op.inputs[0], op.outputs[0]):
            tensor = model.tensors[index]
            quant = qgraph.tensor(tensor.name).quant
            assert quant is not None and quant.method == "imported"
            assert float(quant.scale) == float(tensor.quant.scale)
            assert int(quant.zero_point) == int(tensor.quant.zero_point)


def test_params_follow_from_the_scales_as_the_json_check_recomputes(
    imported: tuple[Path, pipeline.QuantizeResult],
) -> None:
    _, result = imported
    assert list(problems(result.document)) == []
